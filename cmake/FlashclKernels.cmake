# FlashclKernels.cmake - fcl_embed_kernels(<output.c> [PREFIX <name>] <file.cl>...):
# a custom command that regenerates <output.c> whenever one of the kernels
# changes.  PREFIX (default fcl_cl_) starts the arrays' names, so that two
# libraries linked statically into one program can each embed a kernel.
function(fcl_embed_kernels output)
  cmake_parse_arguments(EMBED "" "PREFIX" "" ${ARGN})
  set(inputs ${EMBED_UNPARSED_ARGUMENTS})
  if(NOT EMBED_PREFIX)
    set(EMBED_PREFIX fcl_cl_)
  endif()
  string(REPLACE ";" "|" inputs_arg "${inputs}")  # a list does not survive the command line
  add_custom_command(
    OUTPUT "${output}"
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${output} "-DINPUTS=${inputs_arg}" -DPREFIX=${EMBED_PREFIX}
            -P "${PROJECT_SOURCE_DIR}/cmake/embed_kernels.cmake"
    DEPENDS ${inputs} "${PROJECT_SOURCE_DIR}/cmake/embed_kernels.cmake"
    COMMENT "Embedding OpenCL kernels into ${output}"
    VERBATIM)
endfunction()

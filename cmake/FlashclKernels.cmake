# FlashclKernels.cmake - fcl_embed_kernels(<output.c> <file.cl>...): a custom
# command that regenerates <output.c> whenever one of the kernels changes.
function(fcl_embed_kernels output)
  set(inputs ${ARGN})
  string(REPLACE ";" "|" inputs_arg "${inputs}")  # a list does not survive the command line
  add_custom_command(
    OUTPUT "${output}"
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${output} "-DINPUTS=${inputs_arg}"
            -P "${PROJECT_SOURCE_DIR}/cmake/embed_kernels.cmake"
    DEPENDS ${inputs} "${PROJECT_SOURCE_DIR}/cmake/embed_kernels.cmake"
    COMMENT "Embedding OpenCL kernels into ${output}"
    VERBATIM)
endfunction()

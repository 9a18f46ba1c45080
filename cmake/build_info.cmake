# build_info.cmake - writes build_info.h with the current git commit, in script
# mode, at every build; the file only changes when the commit does.
#   cmake -DSOURCE_DIR=<repo> -DOUTPUT=<build_info.h> -P build_info.cmake
execute_process(COMMAND git describe --always --dirty --abbrev=12
                WORKING_DIRECTORY "${SOURCE_DIR}" OUTPUT_VARIABLE commit
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
endif()
set(text "#define FCL_GIT_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUTPUT}" "${text}")
endif()

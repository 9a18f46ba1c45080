# run_oclgrind.cmake - runs a program under Oclgrind with one checker; fails
# on a non-zero exit or on any report.
#   cmake -DOCLGRIND=<oclgrind> -DCHECK=<--data-races|--uninitialized>
#         -DPROGRAM=<exe> -DLOG=<file> [-DLOCAL_MEM=<bytes>] [-DARGS=<arg>]
#         -P run_oclgrind.cmake
# LOCAL_MEM: the device's __local memory instead of Oclgrind's 32 KiB;
# ARGS: the program's argument.
# One checker per run: with --data-races and --uninitialized together,
# Oclgrind 21.10 stopped reporting a planted race.  -cl-opt-disable: the
# uninitialised-value checker cannot interpret LLVM's `freeze` instruction,
# which the optimiser inserts for paired division and remainder.
file(REMOVE "${LOG}")
set(local_mem "")
if(LOCAL_MEM)
  set(local_mem --local-mem-size ${LOCAL_MEM})
endif()
execute_process(
  COMMAND "${OCLGRIND}" ${CHECK} --check-api ${local_mem} --build-options -cl-opt-disable
          --log "${LOG}" "${PROGRAM}" ${ARGS}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
set(report "")
if(EXISTS "${LOG}")
  file(READ "${LOG}" report)
endif()
if(NOT report STREQUAL "")
  message(FATAL_ERROR "Oclgrind (${CHECK}) reported problems:\n${report}")
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} under Oclgrind exited with ${rc}")
endif()

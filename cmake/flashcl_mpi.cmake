# flashcl_mpi.cmake - the optional MPI part: ring attention across ranks
# (include/flashcl_mpi.h, src/dist/), built only when CMake finds MPI for C.
# The core library never links MPI.  Included at the end of the top-level
# CMakeLists.txt: the library, its tests and benchmark, and its install as
# component `mpi` of the CMake package and as pkg-config `flashcl-mpi`.
find_package(MPI COMPONENTS C QUIET)
if(NOT MPI_C_FOUND)
  message(STATUS "flashcl: MPI not found, flashcl_mpi not built (libopenmpi-dev)")
  return()
endif()

# its own copies of the kernels it builds (the merge is combine.cl's)
set(FCL_DIST_KERNEL_C "${PROJECT_BINARY_DIR}/generated/dist_kernel_sources.c")
fcl_embed_kernels("${FCL_DIST_KERNEL_C}" PREFIX fcl_dist_cl_
  "${PROJECT_SOURCE_DIR}/cl/common.cl" "${PROJECT_SOURCE_DIR}/cl/combine.cl"
  "${PROJECT_SOURCE_DIR}/cl/dist.cl")
add_library(flashcl_mpi_objects OBJECT
  src/dist/mpi_context.c src/dist/agree.c src/dist/shards.c src/dist/ring.c
  src/dist/forward.c src/dist/backward.c src/dist/tensors.c src/dist/node_copy.c
  "${FCL_DIST_KERNEL_C}")
set_target_properties(flashcl_mpi_objects PROPERTIES POSITION_INDEPENDENT_CODE ON
                      C_VISIBILITY_PRESET hidden)
target_include_directories(flashcl_mpi_objects PRIVATE include src/dist)
find_package(Threads REQUIRED) # node_copy.c's copies within a host
target_link_libraries(flashcl_mpi_objects PUBLIC OpenCL::OpenCL MPI::MPI_C Threads::Threads)
target_compile_options(flashcl_mpi_objects PRIVATE ${FCL_WARNINGS})
target_compile_definitions(flashcl_mpi_objects PRIVATE FCL_BUILDING_SHARED)

add_library(flashcl_mpi SHARED $<TARGET_OBJECTS:flashcl_mpi_objects>)
add_library(flashcl_mpi_static STATIC $<TARGET_OBJECTS:flashcl_mpi_objects>)
target_link_libraries(flashcl_mpi PUBLIC flashcl MPI::MPI_C PRIVATE Threads::Threads)
target_link_libraries(flashcl_mpi_static PUBLIC flashcl_static MPI::MPI_C Threads::Threads)
foreach(t flashcl_mpi flashcl_mpi_static)
  target_include_directories(${t} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  if(NOT WIN32)
    target_link_libraries(${t} PRIVATE m)
  endif()
endforeach()
set_target_properties(flashcl_mpi_static PROPERTIES OUTPUT_NAME flashcl_mpi)
set_target_properties(flashcl_mpi PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
add_library(flashcl::flashcl_mpi ALIAS flashcl_mpi)
add_library(flashcl::flashcl_mpi_static ALIAS flashcl_mpi_static)

# ---- tests: mpirun with 1, 2 and 3 ranks on the default device ------------
if(FLASHCL_BUILD_TESTS)
  add_executable(test_mpi tests/test_mpi.c)
  target_link_libraries(test_mpi PRIVATE flashcl_mpi_static fcl_test_support)
  # its test hook (dist_debug_set_bounds) is declared in src/dist/dist_internal.h
  target_include_directories(test_mpi PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(test_mpi PRIVATE ${FCL_WARNINGS})
  set_target_properties(test_mpi PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/tests")
  # Open MPI's settings as environment variables (other MPIs ignore them):
  # more ranks than cores, root allowed (CI runs as root), shared memory and
  # loopback only, no warnings about the missing fast networks.
  set(FCL_MPI_TEST_ENV FLASHCL_CACHE_DIR=off OMPI_MCA_rmaps_base_oversubscribe=1
      OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
      OMPI_MCA_pml=ob1 OMPI_MCA_btl_vader_single_copy_mechanism=none
      OMPI_MCA_btl_base_warn_component_unused=0 OMPI_MCA_orte_base_help_aggregate=0
      OMPI_MCA_hwloc_base_binding_policy=none PRTE_MCA_rmaps_default_mapping_policy=:oversubscribe)
  list(APPEND FCL_MPI_TEST_ENV FCL_TEST_POCL_CACHE=${PROJECT_BINARY_DIR}/tests/pocl-cache)
  # np1 and np2 move the messages by the ranks' own copies (the default:
  # 8 threads); np3 by MPI (FLASHCL_MPI_COPY_THREADS=0); np3_copy by 3 threads,
  # each copied message's upload streamed in pieces of 4000 bytes
  # (FLASHCL_MPI_UPLOAD_PIECE, flashcl_mpi.h)
  foreach(np 1 2 3)
    # three ranks on two cores is the slow one: the cases that need it most
    set(quick "")
    set(env "${FCL_MPI_TEST_ENV}")
    if(np EQUAL 3)
      set(quick --quick)
      list(APPEND env FLASHCL_MPI_COPY_THREADS=0)
    endif()
    add_test(NAME test_mpi_np${np}
      COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
              $<TARGET_FILE:test_mpi> ${quick} ${MPIEXEC_POSTFLAGS})
    # a hang (a rank waiting for a message that never comes) fails, never blocks CI
    set_tests_properties(test_mpi_np${np} PROPERTIES TIMEOUT 240 ENVIRONMENT "${env}")
  endforeach()
  add_test(NAME test_mpi_np3_copy
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 3 ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:test_mpi> --quick ${MPIEXEC_POSTFLAGS})
  set_tests_properties(test_mpi_np3_copy PROPERTIES TIMEOUT 240
                       ENVIRONMENT "${FCL_MPI_TEST_ENV};FLASHCL_MPI_COPY_THREADS=3;FLASHCL_MPI_UPLOAD_PIECE=4000")
endif()

# ---- the benchmark ---------------------------------------------------------
if(FLASHCL_BUILD_BENCH)
  add_executable(flashcl-bench-mpi bench/flashcl-bench-mpi.c)
  add_dependencies(flashcl-bench-mpi fcl_build_info)
  # --trace reads the host's timeline (dist_debug_trace, src/dist/dist_internal.h)
  target_include_directories(flashcl-bench-mpi PRIVATE "${PROJECT_BINARY_DIR}/generated/bench"
                             ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(flashcl-bench-mpi PRIVATE flashcl_mpi_static m)
  target_compile_options(flashcl-bench-mpi PRIVATE ${FCL_WARNINGS})
  set_target_properties(flashcl-bench-mpi PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}/bench")
endif()

# ---- install: component `mpi` of the CMake package, pkg-config flashcl-mpi --
# Only on request (cmake --install build --component mpi), so that a plain
# install and the Debian package stay free of MPI.
install(TARGETS flashcl_mpi flashcl_mpi_static EXPORT flashclMpiTargets COMPONENT mpi EXCLUDE_FROM_ALL
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES include/flashcl_mpi.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT mpi EXCLUDE_FROM_ALL)
install(EXPORT flashclMpiTargets NAMESPACE flashcl:: COMPONENT mpi EXCLUDE_FROM_ALL
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/flashcl)
# MPI's own flags, as CMake found them (users usually build with mpicc,
# which adds them anyway); the rest is flashcl.pc's relocatable scheme.
set(FCL_PC_MPI_CFLAGS "")
foreach(dir ${MPI_C_INCLUDE_DIRS})
  string(APPEND FCL_PC_MPI_CFLAGS " -I${dir}")
endforeach()
set(FCL_PC_MPI_LIBS "")
foreach(lib ${MPI_C_LIBRARIES})
  string(APPEND FCL_PC_MPI_LIBS " ${lib}")
endforeach()
configure_file(cmake/flashcl-mpi.pc.in "${PROJECT_BINARY_DIR}/flashcl-mpi.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/flashcl-mpi.pc" DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT mpi EXCLUDE_FROM_ALL)

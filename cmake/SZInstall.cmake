# cmake/SZInstall.cmake — what `cmake --install` puts under the prefix:
#   lib/libstarzero.{a,so}, lib/libstarzero_gpt2.{a,so}, lib/libstarzero_llama.{a,so}
#   include/starzero.h, starzero_starpu.h (user-defined operations; includes StarPU), starzero_train.h
#            (the training loop: state, signals, config, schedules), starzero_gpt2.h, starzero_llama.h
#   lib/cmake/StarZeRO/  StarZeROConfig.cmake (+ version file, exported targets): find_package(StarZeRO)
#                        gives StarZeRO::starzero (static), StarZeRO::starzero_shared, StarZeRO::gpt2,
#                        StarZeRO::gpt2_shared, StarZeRO::llama, StarZeRO::llama_shared, and finds
#                        their dependencies itself
#   lib/pkgconfig/       starzero.pc, starzero_gpt2.pc, starzero_llama.pc (relocatable: paths
#                        relative to ${pcfiledir})
#   bin/                 the commands (sz-train, sz-estimate, sz-prepare, sz-info, sz-bench, sz-state, ...)
#   share/starzero/examples/  custom_model.c and its CMakeLists.txt (a complete app to copy)
# Included by the top CMakeLists.txt after the targets exist.
include(CMakePackageConfigHelpers)
set(SZ_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/StarZeRO)

install(TARGETS starzero starzero_shared sz_gpt2 sz_gpt2_shared sz_llama sz_llama_shared EXPORT StarZeROTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
file(GLOB SZ_PUBLIC_HEADERS ${PROJECT_SOURCE_DIR}/include/*.h)
install(FILES ${SZ_PUBLIC_HEADERS} ${PROJECT_SOURCE_DIR}/apps/gpt2/starzero_gpt2.h
              ${PROJECT_SOURCE_DIR}/apps/llama/starzero_llama.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(SZ_BUILD_APPS)   # every command in apps/*.c; the custom-model example is a source to read, not a command
  set(SZ_INSTALLED_APPS)
  foreach(src ${SZ_APPS})
    get_filename_component(app ${src} NAME_WE)
    if(NOT app STREQUAL "sz-mlp-example")
      list(APPEND SZ_INSTALLED_APPS ${app})
    endif()
  endforeach()
  install(TARGETS ${SZ_INSTALLED_APPS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

install(FILES ${PROJECT_SOURCE_DIR}/apps/examples/custom_model.c ${PROJECT_SOURCE_DIR}/apps/examples/CMakeLists.txt
        DESTINATION ${CMAKE_INSTALL_DATADIR}/starzero/examples)

install(EXPORT StarZeROTargets NAMESPACE StarZeRO:: DESTINATION ${SZ_CMAKE_DIR})

# What the package's config must find again on the user's side: the pkg-config modules as found
# here (their directories as a fallback search path), oneDNN's library, CUDA when built with it.
set(SZ_PC_PATH_HINTS)
foreach(prefix ${STARPU_PREFIX} ${STARPUMPI_PREFIX} ${HWLOC_PREFIX} ${CJSON_PREFIX})
  list(APPEND SZ_PC_PATH_HINTS ${prefix}/lib/pkgconfig ${prefix}/${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
list(REMOVE_DUPLICATES SZ_PC_PATH_HINTS)
get_filename_component(SZ_DNNL_LIBDIR ${DNNL_LIB} DIRECTORY)
if(SZ_USE_CUDA)
  set(SZ_CUDA_NOTE ", and the CUDA toolkit (cudart, cuBLAS)")
else()
  set(SZ_CUDA_NOTE "")
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/StarZeROConfig.cmake.in
  ${PROJECT_BINARY_DIR}/StarZeROConfig.cmake INSTALL_DESTINATION ${SZ_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/StarZeROConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)   # 0.x: a minor version may break
install(FILES ${PROJECT_BINARY_DIR}/StarZeROConfig.cmake ${PROJECT_BINARY_DIR}/StarZeROConfigVersion.cmake
        DESTINATION ${SZ_CMAKE_DIR})

# pkg-config. The public headers need StarPU's flags (starzero_starpu.h includes starpu.h) and
# cJSON's (starzero_train.h's manifests are cJSON objects), so those are Requires; the rest only
# matters for static linking (--static): Requires.private and Libs.private.
pkg_search_module(SZ_MPI_PC QUIET ompi-c mpich mpi-c mpi)
set(SZ_PC_REQUIRES "${STARPUMPI_MODULE_NAME} ${STARPU_MODULE_NAME} libcjson")
set(SZ_PC_REQUIRES_PRIVATE "hwloc zlib")
if(SZ_MPI_PC_FOUND)
  string(APPEND SZ_PC_REQUIRES_PRIVATE " ${SZ_MPI_PC_MODULE_NAME}")
endif()
set(SZ_PC_LIBS_PRIVATE "-L${SZ_DNNL_LIBDIR} -ldnnl ${OpenMP_C_FLAGS} -lm")
if(SZ_USE_CUDA)
  string(APPEND SZ_PC_LIBS_PRIVATE " -L${CUDAToolkit_LIBRARY_DIR} -lcublasLt -lcublas -lcudart")
  if(SZ_HAVE_NCCL)
    get_filename_component(SZ_NCCL_LIBDIR ${NCCL_LIB} DIRECTORY)
    string(APPEND SZ_PC_LIBS_PRIVATE " -L${SZ_NCCL_LIBDIR} -lnccl")
  endif()
  string(APPEND SZ_PC_LIBS_PRIVATE " -lstdc++")
endif()
# An app's binary finds the library and StarPU without LD_LIBRARY_PATH: an rpath to the library's
# directory and to StarPU's (unless a system directory), in Libs.
set(SZ_PC_RPATH "-Wl,-rpath,\${libdir}")
set(_sz_rpath_dirs)
foreach(d ${STARPUMPI_LIBRARY_DIRS} ${STARPU_LIBRARY_DIRS})
  if(NOT d IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES AND NOT d IN_LIST _sz_rpath_dirs)
    list(APPEND _sz_rpath_dirs ${d})
    string(APPEND SZ_PC_RPATH " -Wl,-rpath,${d}")
  endif()
endforeach()
set(SZ_PC_CFLAGS "")
set(SZ_PC_CUDA_INCLUDEDIR "")
if(SZ_USE_CUDA)
  # starpu.h includes the toolkit's headers (cusparse.h, ...), which warn under -Wall: the toolkit's
  # include directories as system directories (-isystem wins over a -I of the same directory
  # elsewhere in the flags), as CMake's imported targets do
  set(SZ_PC_CFLAGS "-DSZ_HAVE_CUDA=1")
  foreach(d ${CUDAToolkit_INCLUDE_DIRS})
    string(APPEND SZ_PC_CFLAGS " -isystem ${d}")
  endforeach()
  list(GET CUDAToolkit_INCLUDE_DIRS 0 SZ_PC_CUDA_INCLUDEDIR)
endif()
file(RELATIVE_PATH SZ_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" SZ_PC_TO_PREFIX "${SZ_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/starzero.pc.in ${PROJECT_BINARY_DIR}/starzero.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/starzero_gpt2.pc.in ${PROJECT_BINARY_DIR}/starzero_gpt2.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/starzero_llama.pc.in ${PROJECT_BINARY_DIR}/starzero_llama.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/starzero.pc ${PROJECT_BINARY_DIR}/starzero_gpt2.pc ${PROJECT_BINARY_DIR}/starzero_llama.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

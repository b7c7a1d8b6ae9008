# tests/cuda_emu/CudaEmu.cmake — the host CUDA emulation's build pieces, included by the top
# CMakeLists.txt (for -DSZ_CUDA_EMULATION=ON) and by tests/CMakeLists.txt (the kernel test):
#   sz_emu_rewrite(OUT DIR FILES...)  each .cu / .cuh rewritten by launch.sed into DIR (a .cu as
#                                     NAME.cu.cpp, force-including sz_cuda_emu.h); OUT: them all, in
#                                     order (sources of the target, so that they are made first)
#   sz_emu_runtime_libs()             (SZ_CUDA_EMULATION) the emulation as libcudart, libcublas and
#                                     libcusparse under ${CMAKE_BINARY_DIR}/cuda-emu, with the sonames
#                                     and symbol versions of the toolkit's, so that StarPU's CUDA
#                                     workers, which link those, drive the emulated GPU too, and libnccl
#                                     (over MPI); sets SZ_EMU_LIBS (what the library links instead of
#                                     the toolkit's) and NCCL_LIB (the emulated NCCL)
set(SZ_EMU_SRC ${CMAKE_CURRENT_LIST_DIR})

function(sz_emu_rewrite out dir)
  set(gen)
  foreach(f ${ARGN})
    get_filename_component(n ${f} NAME)
    if(n MATCHES "\\.cu$")
      set(o ${dir}/${n}.cpp)
      set_source_files_properties(${o} PROPERTIES COMPILE_OPTIONS "-include;sz_cuda_emu.h")
    else()
      set(o ${dir}/${n})
    endif()
    add_custom_command(OUTPUT ${o} COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
                       COMMAND sed -f ${SZ_EMU_SRC}/launch.sed ${f} > ${o}
                       DEPENDS ${f} ${SZ_EMU_SRC}/launch.sed VERBATIM)
    list(APPEND gen ${o})
  endforeach()
  set(${out} ${gen} PARENT_SCOPE)
endfunction()

# The C++ options of emulated code: the kernels' sources as nvcc takes them (C++17; #pragma unroll
# unknown to g++)
set(SZ_EMU_CXX_OPTIONS $<$<COMPILE_LANGUAGE:CXX>:-std=c++17 -Wno-unknown-pragmas -Werror=attributes>)

function(sz_emu_runtime_libs)
  set(dir ${CMAKE_BINARY_DIR}/cuda-emu)
  foreach(lib cudart cublas cusparse)
    # the toolkit's soname (libcudart.so.13 ...): the one StarPU was linked against
    get_target_property(loc CUDA::${lib} IMPORTED_LOCATION)
    file(REAL_PATH "${loc}" real)
    if(NOT real MATCHES "\\.so\\.([0-9]+)")
      message(FATAL_ERROR "SZ_CUDA_EMULATION: no soname version in ${real} (CUDA::${lib})")
    endif()
    set(ver ${CMAKE_MATCH_1})
    file(WRITE ${dir}/lib${lib}.map "lib${lib}.so.${ver} { global: *; };\n")
    set(src ${SZ_EMU_SRC}/sz_cuda_emu.cpp)
    if(lib STREQUAL cublas)
      set(src ${SZ_EMU_SRC}/sz_cublas_emu.cpp)
    elseif(lib STREQUAL cusparse)
      set(src ${SZ_EMU_SRC}/sz_cusparse_emu.cpp)
    endif()
    add_library(sz_emu_${lib} SHARED ${src})
    set_target_properties(sz_emu_${lib} PROPERTIES OUTPUT_NAME ${lib} SOVERSION ${ver}
                          LIBRARY_OUTPUT_DIRECTORY ${dir})
    target_include_directories(sz_emu_${lib} PUBLIC ${SZ_EMU_SRC} ${CUDAToolkit_INCLUDE_DIRS})
    target_compile_options(sz_emu_${lib} PRIVATE ${SZ_EMU_CXX_OPTIONS} -Wall -Wextra)
    target_link_options(sz_emu_${lib} PRIVATE -Wl,--version-script=${dir}/lib${lib}.map)
  endforeach()
  target_compile_definitions(sz_emu_cudart PRIVATE SZ_CUDA_EMU_HEAP=1)
  target_link_libraries(sz_emu_cublas PRIVATE sz_emu_cudart)
  set(libs sz_emu_cudart sz_emu_cublas sz_emu_cusparse)
  if(NCCL_LIB AND NCCL_INCLUDE) # NCCL over MPI between the ranks' processes (unversioned symbols, as NCCL's)
    file(REAL_PATH "${NCCL_LIB}" real)
    if(NOT real MATCHES "\\.so\\.([0-9]+)")
      message(FATAL_ERROR "SZ_CUDA_EMULATION: no soname version in ${real} (NCCL)")
    endif()
    add_library(sz_emu_nccl SHARED ${SZ_EMU_SRC}/sz_nccl_emu.cpp)
    set_target_properties(sz_emu_nccl PROPERTIES OUTPUT_NAME nccl SOVERSION ${CMAKE_MATCH_1}
                          LIBRARY_OUTPUT_DIRECTORY ${dir})
    target_include_directories(sz_emu_nccl PRIVATE ${NCCL_INCLUDE})
    target_compile_definitions(sz_emu_nccl PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
    target_compile_options(sz_emu_nccl PRIVATE ${SZ_EMU_CXX_OPTIONS} -Wall -Wextra)
    target_link_libraries(sz_emu_nccl PRIVATE sz_emu_cudart MPI::MPI_C)
    set(NCCL_LIB sz_emu_nccl PARENT_SCOPE) # what the library links instead
  endif()
  set(SZ_EMU_LIBS ${libs} PARENT_SCOPE)
endfunction()

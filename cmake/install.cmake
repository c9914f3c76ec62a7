# `cmake --install build --prefix P` installs:
#   P/include/braid/...                 every header (braid/braid.h includes the public ones)
#   P/lib/libbraid_<layer>.a            the layers
#   P/lib/cmake/braid/                  find_package(braid) -> braid::braid (and braid::<layer>)
#   P/lib/pkgconfig/braid.pc            pkg-config --cflags --libs braid
#   P/bin/braid                         the CLI (braid launch runs the multi-process examples)
# Both package files locate the prefix from their own path, so an installed
# tree can be moved (cmake --install --prefix overrides the configured prefix).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(braid_layers)
foreach(layer ${BRAID_LAYERS})
  if(TARGET braid_${layer})
    list(APPEND braid_layers braid_${layer})
  endif()
endforeach()

install(DIRECTORY ${PROJECT_SOURCE_DIR}/braid/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/braid
        FILES_MATCHING PATTERN "*.h")
install(TARGETS ${braid_layers} braid_library EXPORT braidTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET braid)
  install(TARGETS braid RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(braid_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/braid)
install(EXPORT braidTargets NAMESPACE braid:: DESTINATION ${braid_cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/braid-config.cmake.in
                              ${PROJECT_BINARY_DIR}/braid-config.cmake INSTALL_DESTINATION ${braid_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/braid-config-version.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/braid-config.cmake ${PROJECT_BINARY_DIR}/braid-config-version.cmake
        DESTINATION ${braid_cmake_dir})

# pkg-config: static libraries, so --libs lists every layer (users before the
# layers they use, for the linker) and every dependency.
# BRAID_LAYERS lists them lowest first, so its reverse is the linker's order.
set(braid_pc_libs)
set(braid_pc_layers ${BRAID_LAYERS})
list(REVERSE braid_pc_layers)
foreach(layer ${braid_pc_layers})
  if(TARGET braid_${layer})
    string(APPEND braid_pc_libs " -lbraid_${layer}")
  endif()
endforeach()
# The CUDA backend registers itself (nothing calls it by name): the linker is
# told to keep it, and it needs the CUDA libraries.
set(braid_pc_cuda "")
if(BRAID_CUDA)
  get_filename_component(braid_cudnn_dir ${BRAID_CUDNN_LIBRARY} DIRECTORY)
  get_filename_component(braid_nccl_dir ${BRAID_NCCL_LIBRARY} DIRECTORY)
  set(braid_pc_cuda " -Wl,--undefined=braid_cuda_backend_anchor -Wl,--undefined=braid_cuda_nccl_anchor -L${CUDAToolkit_LIBRARY_DIR} -L${braid_cudnn_dir} -L${braid_nccl_dir} -Wl,-rpath,${CUDAToolkit_LIBRARY_DIR} -lcudart -lcublas -lcublasLt -lcudnn -lnccl")
endif()
# ${pcfiledir}/.. up to the prefix, whatever depth CMAKE_INSTALL_LIBDIR has.
file(RELATIVE_PATH braid_pc_up /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" braid_pc_up "${braid_pc_up}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/braid.pc.in ${PROJECT_BINARY_DIR}/braid.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/braid.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

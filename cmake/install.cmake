# install.cmake - what `cmake --install` lays out, and the packages CPack
# makes of it (included by the top CMakeLists.txt). docs/deploy.md says how
# an operator uses them.
#
#   <prefix>/bin/scuda
#   <prefix>/lib/scuda/libcuda.so.1, libcuda.so, libscuda.so, libnvidia-ml.so.1
#   <prefix>/lib/systemd/system/scuda-server.service
#   <prefix>/share/doc/scuda/   README.md, LICENSE, docs/*.md
#
# The shims go to a directory of their own, never lib/ itself: a
# libcuda.so.1 on the system library path would shadow the real driver
# of every program on a GPU host. `scuda run` finds them as
# <dir of scuda>/../lib/scuda (src/cli/shim_env.c).

set(SCUDA_SHIM_DIR lib/scuda)

install(TARGETS scuda RUNTIME DESTINATION bin)
install(TARGETS scuda_shim LIBRARY DESTINATION ${SCUDA_SHIM_DIR})
# The LD_PRELOAD copy and the link for programs that link -lcuda at run
# time (the build makes both next to the shim).
install(FILES ${CMAKE_BINARY_DIR}/lib/libscuda.so DESTINATION ${SCUDA_SHIM_DIR})
install(CODE "execute_process(COMMAND \${CMAKE_COMMAND} -E create_symlink libcuda.so.1
              \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${SCUDA_SHIM_DIR}/libcuda.so\")")
if(TARGET scuda_nvml_shim)
  install(TARGETS scuda_nvml_shim LIBRARY DESTINATION ${SCUDA_SHIM_DIR})
endif()
install(FILES ${CMAKE_SOURCE_DIR}/deploy/systemd/scuda-server.service DESTINATION lib/systemd/system)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/LICENSE DESTINATION share/doc/scuda)
file(GLOB SCUDA_DOCS ${CMAKE_SOURCE_DIR}/docs/*.md)
install(FILES ${SCUDA_DOCS} DESTINATION share/doc/scuda/docs)

# ---- packages: a .deb (installs under /usr) and a relocatable .tar.gz ----
set(CPACK_PACKAGE_NAME scuda)
set(CPACK_PACKAGE_VENDOR "SCUDA")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "GPU over IP: run CUDA programs on a GPU in another machine")
set(CPACK_RESOURCE_FILE_LICENSE ${CMAKE_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR "DEB;TGZ")
set(CPACK_PACKAGE_FILE_NAME "scuda-${PROJECT_VERSION}-linux-${CMAKE_SYSTEM_PROCESSOR}")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "SCUDA maintainers <scuda@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
# What the binaries link (ldd): glibc, OpenSSL 3 (Debian 12: libssl3;
# Ubuntu 24.04: libssl3t64, which provides libssl3), zstd (both sides:
# compressed copies) and LZ4 (the server: compressed fatbins).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6 (>= 2.34), libssl3 | libssl3t64, libzstd1, liblz4-1")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "GPU over IP: run CUDA programs on a GPU in another machine.\n The scuda command (server and client), and SCUDA's libcuda.so.1 and\n libnvidia-ml.so.1 shims in /usr/lib/scuda (never on the system library\n path). The systemd unit scuda-server.service is installed, not enabled.")
# The service's user and /etc/scuda (deploy/debian/postinst).
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/deploy/debian/postinst)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)

# The Debian package, `make deb` (docs/operations.md, "Installing the package"): CPack's DEB
# generator packs what `cmake --install` installs under /usr, from the release tree that
# `make` built, so the package costs no second build. Included after every install() rule.

# Completion scripts, made by the built client from its command table (`trainq completion`),
# where bash-completion, zsh and fish look for a vendor's.
set(completion_dir ${CMAKE_BINARY_DIR}/completions)
set(completion_files "")
foreach(shell bash zsh fish)
  set(out ${completion_dir}/${shell})
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${completion_dir}
    COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=0
            sh -c "\"$0\" completion ${shell} > \"$1\"" $<TARGET_FILE:trainq> ${out}
    DEPENDS trainq
    VERBATIM)
  list(APPEND completion_files ${out})
endforeach()
add_custom_target(completions ALL DEPENDS ${completion_files})
install(FILES ${completion_dir}/bash DESTINATION share/bash-completion/completions
        RENAME trainq)
install(FILES ${completion_dir}/zsh DESTINATION share/zsh/vendor-completions RENAME _trainq)
install(FILES ${completion_dir}/fish DESTINATION share/fish/vendor_completions.d
        RENAME trainq.fish)

# Debian's changelog and machine-readable copyright, with the dashboard's licence notice
# (uPlot's, read from third_party so the two cannot differ).
set(TRAINQ_PACKAGE_MAINTAINER "trainq maintainers <maintainers@trainq.dev>"
    CACHE STRING "the package's Maintainer field")
string(TIMESTAMP TRAINQ_PACKAGE_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
file(READ ${CMAKE_SOURCE_DIR}/third_party/uplot/LICENSE uplot_licence)
string(STRIP "${uplot_licence}" uplot_licence)
string(REGEX REPLACE "\n\n" "\n.\n" uplot_licence "${uplot_licence}")
string(REGEX REPLACE "\n" "\n " UPLOT_LICENSE " ${uplot_licence}")
set(debian_dir ${CMAKE_BINARY_DIR}/debian)
configure_file(${CMAKE_SOURCE_DIR}/dist/debian/copyright.in ${debian_dir}/copyright @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/dist/debian/changelog.in ${debian_dir}/changelog @ONLY)
install(FILES ${debian_dir}/copyright ${debian_dir}/changelog DESTINATION share/doc/trainq)

# Man pages and the changelog are installed compressed, as Debian policy asks; -n keeps the
# name and time out of the header, so the same tree gives the same bytes.
install(CODE "
  set(dest \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/share\")
  file(GLOB pages \"\${dest}/man/man*/trainq*\")
  list(FILTER pages EXCLUDE REGEX \"[.]gz$\")
  foreach(file \${pages} \${dest}/doc/trainq/changelog)
    file(REMOVE \${file}.gz)
    execute_process(COMMAND gzip -9n \${file} COMMAND_ERROR_IS_FATAL ANY)
  endforeach()")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME trainq)
set(CPACK_PACKAGE_VERSION ${TRAINQ_VERSION_TEXT})
set(CPACK_PACKAGE_CONTACT "${TRAINQ_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "GPU-aware queue for deep-learning training jobs")
# The extended description (the summary above is its first line): lines under 80 columns.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "trainq queues training commands and starts each one as soon as a GPU really
has the memory it needs, with CUDA_VISIBLE_DEVICES and the distributed-training
environment set. It keeps every job's output, exit status and peak GPU memory,
sends jobs that die of CUDA out-of-memory back to the queue, and survives its
own restarts without disturbing running jobs. One machine needs nothing else
(the queue is an embedded SQLite database); a shared server runs one daemon for
all its users; a cluster points every node's daemon at one Redis.
.
This package has the client (trainq), the daemon (trainqd) with its systemd
units, the Slurm look-alike commands in /usr/lib/trainq/slurm, the Python
client, man pages and shell completions.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Runtime dependencies from the binaries' own links (dpkg-shlibdeps, from dpkg-dev).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3, git")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "podman, redis-server, rsync")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_SOURCE_DIR}/dist/debian/postinst ${CMAKE_SOURCE_DIR}/dist/debian/prerm
    ${CMAKE_SOURCE_DIR}/dist/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_THREADS 0)
set(CPACK_POST_BUILD_SCRIPTS ${CMAKE_SOURCE_DIR}/cmake/deb_installed_size.cmake)
include(CPack)

# Run by CPack after it packs the .deb (CPACK_POST_BUILD_SCRIPTS, cmake/Package.cmake).
# CPack counts a symbolic link as a copy of its target in Installed-Size: the seven Slurm
# look-alikes, links to trainq, made it 50 MB for 15 MB of files, and apt tells an admin
# that figure. This writes the size of what is really installed (du, links as links) into
# the control file and packs the same files again with dpkg-deb.
foreach(deb ${CPACK_PACKAGE_FILES})
  set(tree "${deb}.tree")
  file(REMOVE_RECURSE "${tree}")
  execute_process(COMMAND dpkg-deb -R "${deb}" "${tree}" COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND du -sk --apparent-size --exclude=DEBIAN "${tree}"
                  OUTPUT_VARIABLE du COMMAND_ERROR_IS_FATAL ANY)
  string(REGEX MATCH "^[0-9]+" kib "${du}")
  file(READ "${tree}/DEBIAN/control" control)
  string(REGEX REPLACE "Installed-Size: [0-9]+" "Installed-Size: ${kib}" control "${control}")
  file(WRITE "${tree}/DEBIAN/control" "${control}")
  execute_process(COMMAND dpkg-deb --root-owner-group -Zgzip -b "${tree}" "${deb}"
                  OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
  file(REMOVE_RECURSE "${tree}")
endforeach()

# Run by `cmake --install`: writes the systemd units with the prefix they are installed
# under, which `cmake --install --prefix` may choose only now (not at configure time).
# Expects TRAINQ_UNITS_SOURCE (the dist/systemd folder).
set(PREFIX "${CMAKE_INSTALL_PREFIX}")
foreach(unit trainqd.service user/trainqd.service)
  if(unit MATCHES "^user/")
    set(dest "lib/systemd/user")
  else()
    set(dest "lib/systemd/system")
  endif()
  get_filename_component(name "${unit}" NAME)
  set(target "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${dest}/${name}")
  message(STATUS "Installing: ${target}")
  configure_file("${TRAINQ_UNITS_SOURCE}/${unit}" "${target}" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${target}")
endforeach()

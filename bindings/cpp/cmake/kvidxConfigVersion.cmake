# kvidxConfigVersion.cmake — version check for find_package(kvidx [version]).
#
# The version is read from the installed pkg-config file (PREFIX/lib/pkgconfig/kvidx.pc), which
# the install step writes from the crate's version, so this file never goes stale.
# Compatibility: same major version; while the major is 0, the same minor too (semver 0.x);
# and never newer than installed.

set(PACKAGE_VERSION "")
set(_kvidx_pc "${CMAKE_CURRENT_LIST_DIR}/../../pkgconfig/kvidx.pc")
if(EXISTS "${_kvidx_pc}")
  file(STRINGS "${_kvidx_pc}" _kvidx_line REGEX "^Version:")
  string(REGEX REPLACE "^Version:[ \t]*([0-9][0-9.]*).*$" "\\1" PACKAGE_VERSION "${_kvidx_line}")
endif()
unset(_kvidx_pc)
unset(_kvidx_line)

if(PACKAGE_VERSION STREQUAL "")
  set(PACKAGE_VERSION "0.0.0")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
  return()
endif()

# A 64-bit library cannot serve a 32-bit build.
if(DEFINED CMAKE_SIZEOF_VOID_P AND NOT CMAKE_SIZEOF_VOID_P STREQUAL "8")
  set(PACKAGE_VERSION "${PACKAGE_VERSION} (64bit)")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
  return()
endif()

if(NOT PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
else()
  string(REPLACE "." ";" _kvidx_have "${PACKAGE_VERSION}")
  list(GET _kvidx_have 0 _kvidx_major)
  list(GET _kvidx_have 1 _kvidx_minor)
  if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
    set(PACKAGE_VERSION_COMPATIBLE FALSE)
  elseif(NOT PACKAGE_FIND_VERSION_MAJOR STREQUAL _kvidx_major)
    set(PACKAGE_VERSION_COMPATIBLE FALSE)
  elseif(_kvidx_major STREQUAL "0" AND NOT PACKAGE_FIND_VERSION_MINOR STREQUAL _kvidx_minor)
    set(PACKAGE_VERSION_COMPATIBLE FALSE)
  else()
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  endif()
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
  unset(_kvidx_have)
  unset(_kvidx_major)
  unset(_kvidx_minor)
endif()

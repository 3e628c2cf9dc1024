# kvidxConfig.cmake — find_package(kvidx) support for an installed kvidx prefix.
#
# Installed by scripts/install.sh as PREFIX/lib/cmake/kvidx/kvidxConfig.cmake; it finds the
# prefix relative to its own location, so the prefix can be moved or copied anywhere.
#
# Imported targets:
#   kvidx::kvidx         the shared library (libkvidx.so) and PREFIX/include (kvidx.h, kvidx.hpp)
#   kvidx::kvidx_static  the static library (libkvidx.a) with the system libraries it needs
# Variables: kvidx_FOUND, kvidx_VERSION (from kvidxConfigVersion.cmake), kvidx_INCLUDE_DIR,
#            kvidx_PREFIX.
# kvidx.hpp (the C++ wrapper) needs C++17: consumers set CMAKE_CXX_STANDARD 17 or
# target_compile_features(<target> PRIVATE cxx_std_17).

get_filename_component(kvidx_PREFIX "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(kvidx_INCLUDE_DIR "${kvidx_PREFIX}/include")
set(_kvidx_libdir "${kvidx_PREFIX}/lib")

foreach(_kvidx_file "${kvidx_INCLUDE_DIR}/kvidx.h" "${_kvidx_libdir}/libkvidx.so"
                    "${_kvidx_libdir}/libkvidx.a")
  if(NOT EXISTS "${_kvidx_file}")
    set(kvidx_FOUND FALSE)
    set(kvidx_NOT_FOUND_MESSAGE "kvidx prefix ${kvidx_PREFIX} is incomplete: missing ${_kvidx_file}")
    return()
  endif()
endforeach()

include(CMakeFindDependencyMacro)
find_dependency(Threads)

if(NOT TARGET kvidx::kvidx)
  add_library(kvidx::kvidx SHARED IMPORTED)
  set_target_properties(kvidx::kvidx PROPERTIES
    IMPORTED_LOCATION "${_kvidx_libdir}/libkvidx.so"
    IMPORTED_SONAME "libkvidx.so.0"
    INTERFACE_INCLUDE_DIRECTORIES "${kvidx_INCLUDE_DIR}")
endif()

if(NOT TARGET kvidx::kvidx_static)
  # The system libraries the Rust standard library inside libkvidx.a needs, as the install step
  # recorded them (rustc --print native-static-libs) in kvidx.pc's Libs.private.
  set(_kvidx_syslibs "")
  if(EXISTS "${_kvidx_libdir}/pkgconfig/kvidx.pc")
    file(STRINGS "${_kvidx_libdir}/pkgconfig/kvidx.pc" _kvidx_private REGEX "^Libs.private:")
    string(REGEX MATCHALL "-l[^ \t]+" _kvidx_flags "${_kvidx_private}")
    foreach(_kvidx_flag IN LISTS _kvidx_flags)
      string(SUBSTRING "${_kvidx_flag}" 2 -1 _kvidx_name)
      if(_kvidx_name STREQUAL "pthread")
        list(APPEND _kvidx_syslibs Threads::Threads)
      elseif(NOT _kvidx_name STREQUAL "c")
        list(APPEND _kvidx_syslibs "${_kvidx_name}")
      endif()
    endforeach()
  endif()
  if(NOT _kvidx_syslibs)
    set(_kvidx_syslibs gcc_s util rt Threads::Threads m ${CMAKE_DL_LIBS})
  endif()
  add_library(kvidx::kvidx_static STATIC IMPORTED)
  set_target_properties(kvidx::kvidx_static PROPERTIES
    IMPORTED_LOCATION "${_kvidx_libdir}/libkvidx.a"
    IMPORTED_LINK_INTERFACE_LANGUAGES "C"
    INTERFACE_INCLUDE_DIRECTORIES "${kvidx_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES "${_kvidx_syslibs}")
  unset(_kvidx_syslibs)
  unset(_kvidx_private)
  unset(_kvidx_flags)
  unset(_kvidx_flag)
  unset(_kvidx_name)
endif()

unset(_kvidx_file)
unset(_kvidx_libdir)
set(kvidx_FOUND TRUE)

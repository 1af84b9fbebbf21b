# SPDX-License-Identifier: Apache-2.0
# ctest remoteledger_soname: the shared library's DT_SONAME is libremoteledger.so.<major>, the
# major being the header's RL_VERSION_MAJOR.
#   cmake -DOBJDUMP=<objdump> -DSHARED=<libremoteledger.so.N.M.P> -DHEADER=<remoteledger.h> -P check_soname.cmake
cmake_minimum_required(VERSION 3.18)
file(STRINGS ${HEADER} line REGEX "^#define RL_VERSION_MAJOR [0-9]+$")
string(REGEX REPLACE "^#define RL_VERSION_MAJOR ([0-9]+)$" "\\1" major "${line}")
if(NOT major MATCHES "^[0-9]+$")
  message(FATAL_ERROR "${HEADER}: no RL_VERSION_MAJOR")
endif()
execute_process(COMMAND ${OBJDUMP} -p ${SHARED} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${OBJDUMP} -p ${SHARED} failed: ${err}")
endif()
if(NOT out MATCHES "SONAME +([^\n ]+)")
  message(FATAL_ERROR "${SHARED} has no SONAME")
endif()
set(soname "${CMAKE_MATCH_1}")
if(NOT soname STREQUAL "libremoteledger.so.${major}")
  message(FATAL_ERROR "${SHARED}: SONAME ${soname}, want libremoteledger.so.${major}")
endif()
message(STATUS "${SHARED}: SONAME ${soname}")

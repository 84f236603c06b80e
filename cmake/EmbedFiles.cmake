# Writes OUT, a C++ file holding each of ASSETS ("URL=FILE", FILE relative to ROOT) as an
# array with its content type and ETag, for web_assets.h. GCC 12 and clang 14 have no
# #embed, so the build makes the arrays: `cmake -DROOT=... -DOUT=... -DASSETS=a|b -P this`
# (entries split by '|': a list's ';' would split the command's argument).
string(REPLACE "|" ";" ASSETS "${ASSETS}")
set(body "")
set(table "")
set(n 0)
foreach(entry ${ASSETS})
  string(REPLACE "=" ";" parts "${entry}")
  list(GET parts 0 url)
  list(GET parts 1 file)
  set(path "${ROOT}/${file}")
  file(READ "${path}" hex HEX)
  string(LENGTH "${hex}" hex_length)
  math(EXPR size "${hex_length} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  file(SHA256 "${path}" digest)
  string(SUBSTRING "${digest}" 0 20 tag)
  if(file MATCHES "\\.html$")
    set(type "text/html; charset=utf-8")
  elseif(file MATCHES "\\.js$")
    set(type "text/javascript; charset=utf-8")
  elseif(file MATCHES "\\.css$")
    set(type "text/css; charset=utf-8")
  elseif(file MATCHES "\\.png$")
    set(type "image/png")
  else()
    set(type "application/octet-stream")
  endif()
  string(APPEND body "const unsigned char kAsset${n}[] = {${bytes}0};\n")
  string(APPEND table "    {\"${url}\", \"${type}\", kAsset${n}, ${size}, \"\\\"${tag}\\\"\"},\n")
  math(EXPR n "${n} + 1")
endforeach()
file(WRITE "${OUT}" "// Made by cmake/EmbedFiles.cmake from the files named below; do not edit.
#include \"src/daemon/web_assets.h\"

namespace trainq {
namespace {
${body}}  // namespace

const WebAsset kWebAssets[] = {
${table}};
const size_t kWebAssetCount = ${n};

}  // namespace trainq
")

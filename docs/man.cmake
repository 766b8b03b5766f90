# One manual page from docs/tracekit[-CMD].md (cmake -P, from CMakeLists.txt): its title
# line "# tracekit CMD" becomes the NAME section, with the command's summary as
# `tracekit help` prints it; pandoc writes the roff, the page's "##" sections as .SH,
# tables narrowed to 80 columns (man-tables.lua) and text not stretched (man-header.roff).
# -DIN=page.md -DOUT=page.1 -DTK=tracekit -DPANDOC=pandoc -DVERSION=x.y.z
file(READ "${IN}" md)
string(REGEX MATCH "^# ([^\n]*)" title "${md}")
string(REPLACE " " "-" name "${CMAKE_MATCH_1}")
string(REGEX REPLACE "^# [^\n]*\n" "" body "${md}")
if(name STREQUAL "tracekit")
  set(summary "record, decode and analyse program-execution traces")
else()
  string(REGEX REPLACE "^tracekit-" "" cmd "${name}")
  execute_process(COMMAND "${TK}" help OUTPUT_VARIABLE help COMMAND_ERROR_IS_FATAL ANY)
  if(NOT help MATCHES "\n  ${cmd} +([^\n]*)")
    message(FATAL_ERROR "${IN}: no command '${cmd}' in `tracekit help`")
  endif()
  set(summary "${CMAKE_MATCH_1}")
endif()
string(TOUPPER "${name}" upper)
file(WRITE "${OUT}.md" "## NAME\n\n${name} - ${summary}\n${body}")
get_filename_component(here "${CMAKE_CURRENT_LIST_FILE}" DIRECTORY)
execute_process(COMMAND "${PANDOC}" -s -f markdown-smart -t man --shift-heading-level-by=-1
  --lua-filter=${here}/man-tables.lua -H ${here}/man-header.roff
  -M "title=${upper}" -M section=1 -M "header=tracekit manual" -M "footer=tracekit ${VERSION}"
  -o "${OUT}" "${OUT}.md" COMMAND_ERROR_IS_FATAL ANY)
file(REMOVE "${OUT}.md")

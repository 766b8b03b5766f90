# The report's template as a C string: report.html with report.css and report.js put in
# place of @CSS@ and @JS@ (one file to write; @DATA@ stays for the writer).
#   cmake -DDIR=lib/output/report -DOUT=gen/tk_report_template.h -P embed.cmake
file(READ ${DIR}/report.html html)
file(READ ${DIR}/report.css css)
file(READ ${DIR}/report.js js)
string(REPLACE "@CSS@" "${css}" html "${html}")
string(REPLACE "@JS@" "${js}" html "${html}")
string(FIND "${html}" "@DATA@" at)
if(at EQUAL -1)
  message(FATAL_ERROR "report.html has no @DATA@ marker")
endif()
file(WRITE ${OUT}.tmp "${html}")
file(READ ${OUT}.tmp hex HEX)
file(REMOVE ${OUT}.tmp)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
file(WRITE ${OUT} "/* generated from lib/output/report/ by embed.cmake */\nstatic const char tk_report_template[] = {${hex}0};\n")

# Writes the man page and the completion scripts with the built binary (FT), into DIR: they come
# from the parser that makes --help, so they cannot disagree with it. SHARE is the installed data
# folder the man page names.
foreach(what man bash zsh fish)
  set(name_man ffn-trace.1)
  set(name_bash ffn-trace)
  set(name_zsh _ffn-trace)
  set(name_fish ffn-trace.fish)
  set(args generate ${what})
  if(what STREQUAL "man")
    list(APPEND args --share ${SHARE})
  endif()
  execute_process(COMMAND ${FT} ${args} OUTPUT_FILE ${DIR}/${name_${what}} COMMAND_ERROR_IS_FATAL ANY)
endforeach()

# Run by `cmake --install` (and cpack): the config files in the system
# config directory (/etc for the prefix /usr, PREFIX/etc otherwise; kept if
# an admin changed them) and banyan.service naming the installed broker.
set(source ${CMAKE_CURRENT_LIST_DIR})
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(sysconf /etc)
else()
  set(sysconf ${CMAKE_INSTALL_PREFIX}/etc)
endif()
set(CMAKE_INSTALL_FULL_SBINDIR ${CMAKE_INSTALL_PREFIX}/sbin)
set(CMAKE_INSTALL_FULL_SYSCONFDIR ${sysconf})
set(unit ${BANYAN_BUILD_DIR}/etc/banyan.service)
configure_file(${source}/banyan.service.in ${unit} @ONLY)
file(INSTALL ${unit} DESTINATION ${CMAKE_INSTALL_PREFIX}/lib/systemd/system)
# banyan.toml names the installed banyan-imp.
set(BANYAN_IMP ${CMAKE_INSTALL_PREFIX}/libexec/banyan/banyan-imp)
foreach(name banyan.toml imp.toml)
  configure_file(${source}/${name} ${BANYAN_BUILD_DIR}/etc/${name} @ONLY)
  if(NOT EXISTS "$ENV{DESTDIR}${sysconf}/banyan/${name}")
    file(INSTALL ${BANYAN_BUILD_DIR}/etc/${name} DESTINATION ${sysconf}/banyan)
  endif()
endforeach()

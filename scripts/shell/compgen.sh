# compgen in an activated .venv, for bash and zsh (sourced by .venv/bin/activate; the
# set-up, scripts/setup.sh, adds that line).
#
# bash has a builtin named `compgen` (completion generates its word lists with it) that
# shadows programs on PATH. This function routes every call whose first word is not an
# option (`compgen train ...`, `compgen sample ...`, bare `compgen`) and the program's own
# --help/--version/--*-completion to the program in $VIRTUAL_ENV/bin, and every other call
# (`compgen -W "..." -- word`, as completion scripts make them) to the builtin, so
# completion keeps working. Outside the venv (after `deactivate`) it is the builtin again.
# zsh has no builtin of that name; its bash emulation (bashcompinit) defines a function
# instead, which is kept and called for the option forms.

if [ -n "${ZSH_VERSION:-}" ] && (( ${+functions[compgen]} )) && \
   [ -z "${functions[_compgen_project_routed]:-}" ]; then
  functions[_compgen_zsh_bash_emulation]=${functions[compgen]}
fi

compgen() {
  local program="${VIRTUAL_ENV:-}/bin/compgen"
  case "${1:-}" in
    --help|--version|--install-completion|--show-completion|"") ;;
    -*) program="" ;;
  esac
  if [ -n "$program" ] && [ -x "$program" ]; then
    "$program" "$@"
  elif [ -n "${BASH_VERSION:-}" ]; then
    builtin compgen "$@"
  elif [ -n "${ZSH_VERSION:-}" ] && (( ${+functions[_compgen_zsh_bash_emulation]} )); then
    _compgen_zsh_bash_emulation "$@"
  else
    echo "compgen: not in the compgen virtualenv (source .venv/bin/activate)" >&2
    return 2
  fi
}
_compgen_project_routed() { :; }

# Completion of the program's commands and options: the program answers itself when
# _COMPGEN_COMPLETE is set (Typer's protocol).
if [ -n "${BASH_VERSION:-}" ]; then
  _compgen_project_complete() {
    local IFS=$'\n'
    COMPREPLY=( $(env COMP_WORDS="${COMP_WORDS[*]}" COMP_CWORD="$COMP_CWORD" \
                  _COMPGEN_COMPLETE=complete_bash "${VIRTUAL_ENV:-}/bin/compgen") )
    return 0
  }
  complete -o default -F _compgen_project_complete compgen
elif [ -n "${ZSH_VERSION:-}" ]; then
  _compgen_project_complete() {
    eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _COMPGEN_COMPLETE=complete_zsh \
           "${VIRTUAL_ENV:-}/bin/compgen")
  }
  if (( ${+functions[compdef]} )); then
    compdef _compgen_project_complete compgen
  fi
fi

/* `tracekit --completion bash|zsh`: shell completion written from the command line's own
 * tables (the commands, the options each takes, the --to values, the format names), so it
 * cannot drift from what the parser accepts. CMake runs it at build time and installs the
 * scripts. */
#include <string.h>

#include "cli.h"

/* Append WORD to BUF, space-separated. */
static void add(char *buf, size_t n, const char *word)
{
	size_t len = strlen(buf);

	snprintf(buf + len, n - len, "%s%s", len ? " " : "", word);
}

static void format_names(char *buf, size_t n)
{
	buf[0] = 0;
	for (int id = 1; id < TK_FMT__COUNT; id++)
		add(buf, n, tk_format_name((enum tk_format_id)id));
}

static void command_names(char *buf, size_t n)
{
	buf[0] = 0;
	for (int i = 0; cli_commands[i]; i++)
		add(buf, n, cli_commands[i]->name);
	add(buf, n, "help");
}

static void bash(void)
{
	char names[512], formats[512], opts[2048];

	command_names(names, sizeof names);
	format_names(formats, sizeof formats);
	printf("# bash completion for tracekit (written by `tracekit --completion bash`)\n"
	       "_tracekit() {\n"
	       "\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
	       "\tlocal cmd=${COMP_WORDS[1]} words=\n"
	       "\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n"
	       "\t\tCOMPREPLY=($(compgen -W \"%s\" -- \"$cur\"))\n"
	       "\t\treturn\n"
	       "\tfi\n"
	       "\tcase $cmd:$prev in\n"
	       "\thelp:*) words=\"%s\" ;;\n"
	       "\t*:--format) words=\"%s\" ;;\n", names, names, formats);
	for (int i = 0; cli_commands[i]; i++)
		if (cli_commands[i]->to)
			printf("\t%s:--to) words=\"%s\" ;;\n", cli_commands[i]->name, cli_commands[i]->to);
	printf("\t*)\n"
	       "\t\t[[ $cur == -* ]] || { COMPREPLY=($(compgen -f -- \"$cur\")); return; }\n"
	       "\t\tcase $cmd in\n");
	for (int i = 0; cli_commands[i]; i++) {
		cli_command_options(cli_commands[i], opts, sizeof opts);
		printf("\t\t%s) words=\"%s\" ;;\n", cli_commands[i]->name, opts);
	}
	printf("\t\tesac ;;\n"
	       "\tesac\n"
	       "\tCOMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
	       "}\n"
	       "complete -o default -F _tracekit tracekit\n");
}

static void zsh(void)
{
	char formats[512], opts[2048];

	format_names(formats, sizeof formats);
	printf("#compdef tracekit\n"
	       "# zsh completion for tracekit (written by `tracekit --completion zsh`)\n"
	       "local -a cmds\n"
	       "cmds=(\n");
	for (int i = 0; cli_commands[i]; i++)
		printf("\t'%s:%s'\n", cli_commands[i]->name, cli_commands[i]->summary);
	printf("\t'help:show help for a command'\n"
	       ")\n"
	       "if (( CURRENT == 2 )); then\n"
	       "\t_describe command cmds\n"
	       "\treturn\n"
	       "fi\n"
	       "case $words[2]:$words[CURRENT-1] in\n"
	       "help:*) _describe command cmds; return ;;\n"
	       "*:--format) compadd -- %s; return ;;\n", formats);
	for (int i = 0; cli_commands[i]; i++)
		if (cli_commands[i]->to)
			printf("%s:--to) compadd -- %s; return ;;\n", cli_commands[i]->name,
			       cli_commands[i]->to);
	printf("esac\n"
	       "if [[ $PREFIX == -* ]]; then\n"
	       "\tcase $words[2] in\n");
	for (int i = 0; cli_commands[i]; i++) {
		cli_command_options(cli_commands[i], opts, sizeof opts);
		printf("\t%s) compadd -- %s ;;\n", cli_commands[i]->name, opts);
	}
	printf("\tesac\n"
	       "\treturn\n"
	       "fi\n"
	       "_files\n");
}

int cli_completion(const char *shell)
{
	if (shell && !strcmp(shell, "bash"))
		bash();
	else if (shell && !strcmp(shell, "zsh"))
		zsh();
	else {
		cli_error(NULL, UINT64_MAX, "--completion: expected bash or zsh");
		return EXIT_USAGE;
	}
	return fflush(stdout) ? EXIT_OUTPUT : EXIT_CLEAN;
}

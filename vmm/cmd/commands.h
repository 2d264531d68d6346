/* SPDX-License-Identifier: MIT */
/*
 * Subcommands of the idlevm binary, one cmd_<name>.c each.  Each takes the
 * arguments after its own name (argv[0] is the subcommand name) and returns
 * the process exit status: 0 success, 1 runtime failure, 2 usage error.
 */
#ifndef IVM_COMMANDS_H
#define IVM_COMMANDS_H

#include <stdbool.h>
#include <stdio.h>

#include "report/report.h"

int ivm_cmd_doctor(int argc, char **argv);
int ivm_cmd_helper(int argc, char **argv);
int ivm_cmd_report(int argc, char **argv);
int ivm_cmd_info(int argc, char **argv);
int ivm_cmd_maps(int argc, char **argv);
int ivm_cmd_modules(int argc, char **argv);
int ivm_cmd_profile(int argc, char **argv);
int ivm_cmd_ps(int argc, char **argv);
int ivm_cmd_regs(int argc, char **argv);
int ivm_cmd_stack(int argc, char **argv);

struct ivm_guest_options;
/*
 * Parse the guest options (--domain, --qmp, --core, --vmlinux...) and
 * --help of a command that takes nothing else.  Returns -1 when the command
 * should go on, else the exit status to return.
 */
int ivm_guest_command_args(int argc, char **argv,
			   struct ivm_guest_options *opts,
			   void (*usage)(FILE *out));

/*
 * Print the report of the profile at path: text, folded, pprof or svg as
 * opts->format says (folded = true forces folded stacks), saying on stderr
 * what was damaged or missing.  Returns an exit status.
 */
int ivm_report_file(const char *path, bool folded,
		    struct ivm_report_options *opts, unsigned int grouping);

#endif /* IVM_COMMANDS_H */

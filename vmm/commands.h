/* SPDX-License-Identifier: MIT */
/*
 * Subcommands of the idlevm binary, one cmd_<name>.c each.  Each takes the
 * arguments after its own name (argv[0] is the subcommand name) and returns
 * the process exit status: 0 success, 1 runtime failure, 2 usage error.
 */
#ifndef IVM_COMMANDS_H
#define IVM_COMMANDS_H

int ivm_cmd_helper(int argc, char **argv);
int ivm_cmd_report(int argc, char **argv);

#endif /* IVM_COMMANDS_H */

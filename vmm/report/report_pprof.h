/* SPDX-License-Identifier: MIT */
/*
 * pprof writer: the call tree as a gzipped profile.proto message
 * (perftools.profiles.Profile), readable by `go tool pprof` and
 * `protoc --decode perftools.profiles.Profile profile.proto` after gunzip.
 *
 * Sample types, in this order: to_idle, from_idle, on_cpu (unit "count").
 * One pprof sample per stack and kind, with that kind's count in its slot
 * and labels "kind", "thread" ("comm/tid"), "process" ("comm [pid]"), and
 * numeric "tid" and "pid".  Inline frames are Line entries of one Location,
 * innermost first, as the format specifies.
 *
 * The encoder is written here (the wire format is small), so the writer
 * needs zlib only.
 */
#ifndef IVM_REPORT_PPROF_H
#define IVM_REPORT_PPROF_H

#include "base/error.h"
#include "report/report.h"

/* Write the pprof profile of tree (opts->kind selects kinds) to opts->out. */
struct ivm_error *ivm_report_pprof(const struct ivm_calltree *tree,
				   const struct ivm_report_options *opts);

#endif /* IVM_REPORT_PPROF_H */

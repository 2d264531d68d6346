/* SPDX-License-Identifier: MIT */
/*
 * pprof writer: the call tree as a gzipped profile.proto message
 * (perftools.profiles.Profile), read in full by `go tool pprof` and by
 * the continuous-profiling backends that take pprof; `protoc --decode
 * perftools.profiles.Profile report_pprof.proto` after gunzip shows it.
 *
 * Sample types, in this order: to_idle, from_idle, on_cpu (unit "count").
 * One pprof sample per stack and kind, with that kind's count in its slot
 * and labels "kind", "thread" ("comm/tid"), "process" ("comm [pid]"), and
 * numeric "tid" and "pid".
 *
 * Locations: one per frame address, tied to the Mapping of the file it is
 * in (opts->mappings, mappings.h: the kernel as "[kernel.kallsyms]", each
 * module, each user object, with build-id and file name; a Mapping is
 * written only when a location is in it), at the address a symbolizer
 * must be given: the call (return address - 1), as Go's own profiles do.
 * A named frame's Lines carry function, file and line, inline frames
 * innermost first in one Location; a frame no symbol names has no Line,
 * for a symbolizer that has its file (never a made-up function).
 *
 * time_nanos and duration_nanos come from opts->run; the period is one
 * idle transition in every idle_every; comments name the guest and its
 * kernel release.
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

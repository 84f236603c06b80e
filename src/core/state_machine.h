// The job's life (DESIGN.md section 2) as a table: which state changes are legal. Stores
// check it inside their compare-and-set so no actor can make an illegal move.
#pragma once

#include "trainq/job.h"
#include "trainq/status.h"

namespace trainq {

// queued -> starting | cancelled | blocked;  blocked -> queued | cancelled;
// starting -> running | succeeded | failed | cancelled | queued (OOM or node lost);
// running -> succeeded | failed | cancelled | queued;  done -> queued (`trainq retry`).
// Staying in the same state is not a transition.
bool TransitionAllowed(JobState from, JobState to);

// Ok, or kConflict: "job is succeeded; it cannot become running".
Status CheckTransition(JobState from, JobState to);

}  // namespace trainq

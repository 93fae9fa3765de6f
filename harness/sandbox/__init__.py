"""Process control in the trusted process: start the child, confine it, limit it, talk to it, and classify how it
ended.  Never imports torch or the student's code.

- `policy`: what a child may see, write, spend and be (the one place to read it); `limits`: its budgets.
- `bubblewrap` and `confine`: the two ways the policy is applied (bubblewrap's command line; our own namespaces,
  view and drop, applied by the process to itself), with `seccomp` and `syscalls` underneath; `launch`: the
  launcher script for `confine` on a single run.
- `isolation`: which mechanism works here, starting a single run's child, the report's isolation block, and
  whether a root grader may start a batch at all.
- `scratch`: worker slots (one uid each), the private scratch folder with the copy of a submission, cleanup;
  `stale`: the owner lock by which the next start tells a killed grader's scratch from a live one's.
- `reaper`: an mha-check command waits for every process it started (its subreaper) before it returns.
- `subject`: the child as the engine sees it (`Subject`), started by a `Start` (`Spawn`: a single run's; `pool.Fork`:
  forked from a warm zygote, the batch's or a single run's own).
- `trusted`: every trusted module loaded before a child is given a submission.
"""

"""What one recorded forward pass shows, in the lesson's words: the trace of a target, by job.

The child (`harness.child.recorders.TraceRecorder`) runs the student's forward once on an input of the lesson's
worked example (width d = 8, H = 2 heads of width dh = 4, n = 3 tokens, batch B = 2) and records every torch
operation with the shapes of its tensors, its other arguments, where each input came from and the student's line.
Here, on the trusted side (no torch):

- `vocabulary`: the lesson's steps and worked example, torch's operations grouped by what they do, the shapes
- `naming`: each operation named by the lesson's steps (project, split, move heads forward, scores, scale, mask,
  softmax, mix values, merge, output projection) from its name, its shapes and where its inputs came from
- `registry`: the detectors' registry, each detector a function registered with the ids of the marks it may set;
  `detect_layout`, `detect_scores`, `detect_mask`, `detect_output`: the detectors; `detectors`: all of them, in
  the order they run, with every id they mark (`MutantInfo` checks a mutant's `trace=` against it at import)
- `steps`: each operation as the student reads it (a short call, shapes, the lesson's letters, the line)
- `analysis`: naming, detectors and steps for one recorded forward (pure)
- `result`: `TraceResult`, the record a trace returns, and the lesson's arithmetic
- `drive`: driving the child (`record`, `count_parameters`), the marks named after the mutants that declare them

This package module imports nothing: the mutants import `detectors` (pure, no catalogue), and importing it must not
load `drive`, which reads the catalogue that the mutants make.
"""

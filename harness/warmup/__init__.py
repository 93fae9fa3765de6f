"""What the warm template runs before its first fork, and no forked child may see or find.

`rehearsal` serves a causal layer of its own every kind of request once, so that each child inherits torch's and
our lazy first-use set-up instead of paying it again.  That layer is an attention layer a token or two from right
(a red team made it a full-marks submission by reading its file and changing one token), so it lives here, outside
the parts of `harness` a submission's child may read (`harness.sandbox.policy.CHILD_PARTS`): Landlock and the
view's masks hide this folder, its compiled files included.  The zygote imports it inside the function that runs
the rehearsal and forgets it before any fork (`harness.child.zygote._forget_rehearsal`).
"""

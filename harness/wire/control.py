"""What a grader asks the batch's warm template for on its socket (`harness.sandbox.pool.Zygote` asks,
`harness.child.zygote.template` answers): here, in the layer both sides import, because they must spell it alike
and the child side may not import the trusted sandbox (`tests/unit/test_layers.py`)."""

# a zygote, or one of the meta template's (whose children have the meta device warm)
ZYGOTE, META_ZYGOTE = b"zygote", b"meta-zygote"

"""Process control in the trusted process: start the child, confine it, limit it, talk to it, and classify how it
ended.  Never imports torch or the student's code."""

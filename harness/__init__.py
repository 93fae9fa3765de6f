"""mha-check's harness: target adapter (child side), isolation and RPC, runner, reports and the command line.

Split by trust: `worker`, `target`, `construct` and `layouts` run in the child process next to the student's code
and import torch; `subject`, `runner`, `report` and `cli` run in the trusted process, which never imports the
student's module nor torch, and computes every verdict from plain arrays the child sends back.
"""

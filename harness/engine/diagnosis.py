"""Diagnosis by fingerprint: which known mistake (mutant) does a failing target look like?

Two kinds of evidence, both computed in the trusted process:

- numbers: under the same transplanted weights and input, the target's output is compared with what every mutant
  that declares a `variant` computes (`reference.variants`, numpy).  Equal outputs on both fixed configurations
  are as strong as evidence gets.
- symptoms: which checks failed or errored, and the findings they name (the leakage pattern, the parameter-count
  difference, the normalised error message).  Each mutant's symptoms were recorded by running it through mha-check,
  and stored with its explanation and variant in `mutants/fingerprints.json` (kept current by the tests), so
  diagnosis needs neither torch nor the mutant modules at run time, and also works when the weights could not be
  transplanted.  A mutant whose own check (the first it names) fails here weighs most.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from harness import PACKAGES_ROOT

FINGERPRINTS = Path(PACKAGES_ROOT) / "mutants" / "fingerprints.json"
NOT_PASSED = ("fail", "error")


def symptoms(report) -> dict:
    """The part of a report that characterises a mistake: failing checks and their named findings."""
    failing = sorted(c.id for c in report.checks if c.status in NOT_PASSED)
    findings = sorted(f"{c.id}:{_finding(c)}" for c in report.checks if c.status in NOT_PASSED and _finding(c))
    return {"failing": failing, "findings": findings}


def _finding(c) -> str:
    if c.details.get("diagnosis"):
        return str(c.details["diagnosis"])
    if c.id == "output-shape" and c.message:
        # the error text without the numbers and without where it happened: stable across configurations
        text = re.sub(r"\(at .*", "", c.message)
        return re.sub(r"\d+", "#", text)[:160].strip()
    return ""


def load_fingerprints() -> dict:
    with open(FINGERPRINTS) as f:
        return json.load(f)


def _similarity(mine: dict, theirs: dict) -> float:
    a, b = set(mine["failing"]), set(theirs["failing"])
    fa, fb = set(mine["findings"]), set(theirs["findings"])
    own_check = 1.0 if theirs["killed_by"][0] in a else 0.0
    checks = len(a & b) / max(1, len(a | b))
    findings = len(fa & fb) / max(1, len(fa | fb)) if (fa or fb) else 1.0
    return 0.4 * own_check + 0.3 * checks + 0.3 * findings


def numeric_matches(ctx, prints: dict) -> tuple[list[str], bool] | None:
    """Mutant ids whose variant reproduces the target's outputs on both fixed configurations, and whether the
    target computes the reference function itself.  None when the weights cannot be transplanted."""
    from harness.engine.context import same
    from harness.sandbox.subject import TargetFailure
    from reference import numpy_ref, variants

    if ctx.mapping.index is None:
        return None
    candidates = {mid: fp["variant"] for mid, fp in prints.items() if fp.get("variant")}
    matching, reference_like, used = set(candidates), True, 0
    for cfg in ctx.required_configs():
        try:
            inst = ctx.build(cfg)
            w = ctx.weights_for(inst, "diagnosis")
            ctx.transplant(inst, w)
            x = ctx.input(cfg, "diagnosis")
            y = inst.forward(x)
        except TargetFailure:
            continue
        used += 1
        expected = numpy_ref.forward(x, cfg.heads, w)
        reference_like &= same(y, expected)
        outputs = {m: variants.forward(x, cfg.heads, w, **candidates[m]) for m in matching}
        # a variant that computes the reference's numbers here (finite-fill-100) is no numeric evidence
        matching = {m for m, v in outputs.items() if same(y, v) and not same(v, expected)}
    if not used:
        return None
    return sorted(matching), reference_like


def diagnose(report, ctx=None, fingerprints: dict | None = None) -> dict | None:
    """The closest known mistake, with how sure we are; None for a target that passes."""
    if report.passed or not any(c.status in NOT_PASSED for c in report.checks):
        return None
    prints = fingerprints if fingerprints is not None else load_fingerprints()
    mine = symptoms(report)
    scores = {mid: _similarity(mine, fp) for mid, fp in prints.items()}
    numbers = None
    if ctx is not None:
        try:
            numbers = numeric_matches(ctx, prints)
        except Exception:  # noqa: BLE001 - the child died or raised: fall back to symptoms
            numbers = None
    if numbers and numbers[0]:
        best = max(numbers[0], key=lambda m: scores.get(m, 0.0))
        how, evidence = "exact", ("your outputs equal this mistake's, number for number, under the same weights "
                                  "and inputs")
    else:
        best = max(sorted(scores), key=scores.get) if scores else None
        if best is None:
            return {"mutant": None, "match": "none", "message": "no known mistake to compare with"}
        how = "symptoms" if scores[best] >= 0.999 else "closest"
        evidence = ("the same checks fail with the same findings" if how == "symptoms" else
                    f"the nearest known mistake by symptoms (similarity {scores[best]:.2f}); none matches exactly")
        if numbers and numbers[1] and how == "closest":
            evidence += "; your forward values equal the reference's, so look at what the failing checks name"
    info = prints[best]
    ranked = sorted(sorted(scores), key=lambda m: -scores[m])[:3]
    return {"mutant": best, "match": how, "title": info["title"], "symptom": info["symptom"], "fix": info["fix"],
            "lesson": info["lesson"], "evidence": evidence, "candidates": ranked}


def record(reports: dict) -> dict:
    """The torch-free catalogue of the mutants: explanation, variant and the symptoms seen in their reports."""
    import mutants

    out = {}
    for mid, report in sorted(reports.items()):
        info = mutants.get(mid).INFO
        out[mid] = {"title": info.title, "lesson": info.lesson, "symptom": info.symptom, "fix": info.fix,
                    "example": info.example, "killed_by": list(info.killed_by), "variant": info.variant,
                    **symptoms(report)}
    return out


def main() -> None:
    """`python -m harness.engine.diagnosis`: run every mutant through mha-check and rewrite mutants/fingerprints.json."""
    from concurrent.futures import ThreadPoolExecutor

    import mutants
    from harness.engine.runner import run_checks

    targets = {m.INFO.id: f"{mutants.source_path(m.INFO.id)}:CausalMHA" for m in mutants.all_mutants()}
    with ThreadPoolExecutor(2) as pool:
        reports = dict(zip(targets, pool.map(lambda t: run_checks(t, diagnose=False), targets.values())))
    FINGERPRINTS.write_text(json.dumps(record(reports), indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(reports)} fingerprints to {FINGERPRINTS}")


if __name__ == "__main__":
    main()

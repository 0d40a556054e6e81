"""JUnit XML for CI systems (GitHub Actions, GitLab, Jenkins read it): one testcase per check.

fail -> <failure> (severity error) or a passing case with the message in system-out (warnings/info,
which do not fail the run); error -> <error>; skipped -> <skipped>.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from specops.checks.types import ValidationReport


def junit_xml(reports: list[ValidationReport]) -> str:
    suites = ET.Element("testsuites", name="specops")
    for rep in reports:
        counts = rep.counts()
        hard_fail = sum(1 for r in rep.results if r.status == "fail" and r.severity == "error")
        suite = ET.SubElement(suites, "testsuite", name=f"specops.{rep.checklist}.{rep.deployment}",
                              tests=str(len(rep.results)), failures=str(hard_fail), errors=str(counts["error"]),
                              skipped=str(counts["skipped"]),
                              time=f"{(rep.finished_at - rep.started_at).total_seconds():.3f}",
                              timestamp=rep.started_at.isoformat(timespec="seconds"))
        props = ET.SubElement(suite, "properties")
        for k, v in (("deployment", rep.deployment), ("profile", rep.profile), ("checklist", rep.checklist)):
            ET.SubElement(props, "property", name=k, value=v)
        for r in rep.results:
            case = ET.SubElement(suite, "testcase", classname=f"specops.{rep.checklist}", name=r.id,
                                 time=f"{r.seconds:.3f}")
            text = r.message + (f" To fix: {r.fix}" if r.fix else "")
            if r.status == "error":
                ET.SubElement(case, "error", message=r.message, type="could-not-evaluate").text = text
            elif r.status == "fail" and r.severity == "error":
                ET.SubElement(case, "failure", message=r.message, type=r.kind).text = text
            elif r.status == "skipped":
                ET.SubElement(case, "skipped", message=r.message)
            else:
                ET.SubElement(case, "system-out").text = f"[{r.status}/{r.severity}] {text}"
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(reports: list[ValidationReport], path: str | Path) -> Path:
    from specops.outputs import write_text

    return write_text(path, junit_xml(reports), "--junit", what="JUnit file", make_folders=True)

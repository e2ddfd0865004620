"""Counts test cases from a `bazel test` log and the tests' XML reports.

Prints "N passed, N failed". A test target without per-case XML (a build
failure or a timeout) counts once, as passed or failed by its status.
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

log, testlogs = sys.argv[1], sys.argv[2]
line_re = re.compile(r"^(//\S+?)\s+(?:\(cached\) )?(PASSED|FAILED TO BUILD|FAILED|TIMEOUT|NO STATUS|FLAKY|INCOMPLETE|SKIPPED)\b")
targets = {}
for line in open(log, errors="replace"):
    m = line_re.match(line.rstrip("\n"))
    if m:
        targets[m.group(1)] = m.group(2)
passed = failed = 0
for label, status in targets.items():
    pkg, _, name = label[2:].partition(":")
    xml = os.path.join(testlogs, pkg, name, "test.xml")
    counted = False
    if status in ("PASSED", "FLAKY", "FAILED") and os.path.exists(xml):
        try:
            for case in ET.parse(xml).getroot().iter("testcase"):
                if case.get("status") == "notrun" or case.find("skipped") is not None:
                    continue
                if case.find("failure") is not None or case.find("error") is not None:
                    failed += 1
                else:
                    passed += 1
                counted = True
        except ET.ParseError:
            pass
    if not counted:
        if status in ("PASSED", "FLAKY"):
            passed += 1
        else:
            failed += 1
t_pass = sum(1 for s in targets.values() if s in ("PASSED", "FLAKY"))
print(f"bazel test targets: {t_pass} passed, {len(targets) - t_pass} failed")
print(f"{passed} passed, {failed} failed")

#!/usr/bin/env python3
"""The slowest tests of the last run, from JUnit-style XML (gtest's --gtest_output=xml, ctest's
--output-junit). `make unit` and `make integration` print them so a test that grows slow is
seen the day it does. Usage: slowest_tests.py N FILE..."""
import sys
import xml.etree.ElementTree as ET


def main():
    count, files = int(sys.argv[1]), sys.argv[2:]
    times = []
    for f in files:
        try:
            root = ET.parse(f).getroot()
        except (OSError, ET.ParseError):
            continue
        for case in root.iter("testcase"):
            name = case.get("name", "?")
            suite = case.get("classname", "")
            full = f"{suite}.{name}" if suite and not name.startswith(suite) else name
            times.append((float(case.get("time", "0") or 0), full))
    if not times:
        return
    times.sort(reverse=True)
    total = sum(t for t, _ in times)
    print(f"slowest {min(count, len(times))} of {len(times)} ({total:.0f} s in all):")
    for t, name in times[:count]:
        print(f"  {t:7.2f} s  {name}")


if __name__ == "__main__":
    main()

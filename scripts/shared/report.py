# Shared by arena_cli.py, check_task.py and validation_gates.py: dev/assemble_scripts.py puts this file
# where a script says `# @include report.py`, so that each served file stays one standalone download.

MAX_FINDINGS_SHOWN = 20


def report_lines(report):
    """Readable lines for a validation or check report: the verdict, errors, warnings, gates."""
    lines = []
    errors = report.get("errors") or []
    warnings = report.get("warnings") or []
    counts = []
    if report.get("tasks") is not None:
        counts.append("%s task%s" % (report["tasks"], "" if report["tasks"] == 1 else "s"))
    if report.get("eligible_tasks") is not None:
        counts.append("%s eligible" % report["eligible_tasks"])
    counts.append("%d error%s" % (len(errors), "" if len(errors) == 1 else "s"))
    counts.append("%d warning%s" % (len(warnings), "" if len(warnings) == 1 else "s"))
    valid = report.get("valid")
    if valid is None:
        valid = not errors
    lines.append("%s: %s." % ("Valid" if valid else "NOT valid", ", ".join(counts)))
    source = report.get("source")
    if isinstance(source, dict):
        lines.append(
            "Source: %s %s at %s = commit %s, entry_path %s."
            % (source.get("repo_type"), source.get("repo_id"), source.get("revision"), source.get("commit"),
               json.dumps(source.get("entry_path") or ""))
        )
    if errors:
        lines.append("Errors:")
        for e in errors:
            where = " ".join(str(e[k]) for k in ("task", "file", "field") if e.get(k))
            lines.append("  %s%s: %s" % (e.get("code"), " " + where if where else "", e.get("message", "")))
    if warnings:
        lines.append("Warnings:")
        for w in warnings:
            where = str(w["field"]) if w.get("field") else ""
            if w.get("count") is not None:
                where = (where + " " if where else "") + "(%s)" % w["count"]
            lines.append("  %s%s: %s" % (w.get("code"), " " + where if where else "", w.get("message", "")))
    gates = (report.get("quality_gates") or {}).get("static")
    if isinstance(gates, dict):
        g = gates.get("summary") or {}
        lines.append(
            "Static gates%s: %s tasks: %s blocked, %s rejected, %s eligible (%s need controls, %s for review, %s clean)."
            % (" " + str(gates["version"]) if gates.get("version") else "", g.get("tasks"), g.get("blocked"),
               g.get("rejected"), g.get("eligible"), g.get("needs_controls"), g.get("review"), g.get("clean"))
        )
        findings = gates.get("findings") or []
        if findings:
            lines.append("Findings (%d%s):" % (len(findings), ", the first %d shown" % MAX_FINDINGS_SHOWN
                                               if len(findings) > MAX_FINDINGS_SHOWN else ""))
            for f in findings[:MAX_FINDINGS_SHOWN]:
                where = " ".join(str(f[k]) for k in ("task", "file") if f.get(k))
                lines.append("  %s %s%s: %s" % (f.get("severity"), f.get("code"), " " + where if where else "",
                                                f.get("message", "")))
            if len(findings) > MAX_FINDINGS_SHOWN:
                lines.append("  ... and %d more in the JSON on stdout." % (len(findings) - MAX_FINDINGS_SHOWN))
    excluded = ["%s (%s)" % (t.get("name"), t.get("status")) for t in report.get("task_list") or []
                if isinstance(t, dict) and t.get("status") in ("rejected", "blocked")]
    if excluded:
        lines.append("Not eligible: %s." % ", ".join(excluded))
    return lines


def is_valid(report):
    valid = report.get("valid")
    return (not report.get("errors")) if valid is None else bool(valid)


def emit(answer):
    json.dump(answer, sys.stdout, indent=2, sort_keys=False)
    sys.stdout.write("\n")


def summary(text):
    sys.stderr.write(text.rstrip() + "\n")

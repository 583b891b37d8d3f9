"""Experiment pipelines that do not fit the table-row machinery of compgen.pipelines.runs."""

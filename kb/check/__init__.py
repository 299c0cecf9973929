"""The candidate-list front end of the linter: parse YAML plans, bind them, run the rules.

The functions to call are in :mod:`kb.api.check` (``check_paths``, ``check_text``); this
package knows no registry and is handed its rule units.
"""

"""The web server (daphne with body limits), middleware and storage the shell's settings name (bodylimits,
staleforms, reporting, staticfiles). Part of the shell."""

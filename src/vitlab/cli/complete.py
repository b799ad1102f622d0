"""Shell completion (argcomplete) that answers a Tab without importing torch."""

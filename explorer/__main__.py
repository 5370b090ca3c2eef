"""`python -m explorer`: start the app (explorer.startup.launch)."""
from explorer.startup.launch import main

main()

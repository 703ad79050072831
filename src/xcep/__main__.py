from xcep.cli import run

run()

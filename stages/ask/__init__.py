"""The ask stage: M3-Agent's search-then-answer loop over a memory.

``loop`` runs the rounds, ``tools`` executes each action, ``memory`` reads the LanceDB memory and
``prompts`` holds every instruction the control model sees.
"""

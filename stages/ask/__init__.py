"""The ask stage: M3-Agent's search-then-answer loop over a memory.

``questions`` reads what is asked, ``loop`` runs the rounds and builds each answer record, ``actions``
parses the model's reply into one action, ``tools`` executes it over ``retrieval`` (hybrid search) and
``memory`` (reads the LanceDB memory through the ``nodes`` view), ``prompts`` holds every instruction
the control model sees, ``guards`` cleans answers and refuses wasted rounds, ``offline`` answers
without an LLM, ``people`` and ``choice`` read who a question means and multiple-choice options, and
``text`` holds the terms and times they all share.
"""

"""Memory-wide people: each video's ``<character_k>`` matched to the people a memory already knows.

Per-video records and tables stay as they are; the memory holds the mapping (video, character) ->
person in its own ``people`` table and the user's corrections in ``people_edits``
(:mod:`~m3cli.stages.people.store`). The matching rule lives in :mod:`~m3cli.stages.people.match`,
the step ``m3 index`` runs when videos are added in :mod:`~m3cli.stages.people.add`, corrections in
:mod:`~m3cli.stages.people.edit` and the per-person pages in :mod:`~m3cli.stages.people.pages`.
"""

"""Reading text on screen: :mod:`~.rapid` (PP-OCR through RapidOCR, the default) and :mod:`~.decode`
(its recognition output turned into lines).
"""

"""The pipeline: one module per stage, each a pure function from clip records to clip records.

Installed as ``m3cli.stages``. Read the listing in pipeline order: segment, diarize, voices, faces,
memorize, link, abstract, index, then the ``ask`` package. Beside them: ``core`` (shared machinery),
``eval`` (scoring against ground truth) and ``backends`` (the swappable models).
"""

# One name per file: this folder is the package m3cli.stages. Imported as ``stages`` (a source checkout
# on sys.path) every module would load a second time beside m3cli.stages, with its own M3Error class and
# thread pools, so that name is refused outright.
if __name__ != "m3cli.stages":
    raise ImportError(
        f"{__name__!r} is m3's stage folder under another name: import m3cli.stages "
        "(install m3 with `pip install -e .` or scripts/install.sh)"
    )

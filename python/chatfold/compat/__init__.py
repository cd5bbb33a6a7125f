"""Drop-in modules for the Python packages chatfold does in full:
``chatfold.compat.rollmem`` (rollmem 0.6.0), ``chatfold.compat.chatcram``
(chatcram 0.1.0) and ``chatfold.compat.sawtooth`` (sawtooth-memory 0.3.0:
its managers, configuration, events and storage; its other names import and
raise ``NotSupportedError``). Each keeps the original's names, signatures and defaults,
does the work in Rust, and says in its docs where it fixes the original."""

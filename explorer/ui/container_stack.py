"""Streamlit's stack of open containers, made once per process before the sessions' first runs race for it.

Streamlit keeps each script thread's stack of open containers (`with st.sidebar:`, `with column:`) in a ContextVar
that it creates lazily, on the first call that reads it, without a lock (`context_dg_stack`, a
`ContextVarWithLazyDefault` in streamlit/delta_generator_singletons.py, 1.67). When a class opens the app at once,
two first runs can both find it missing: one creates it and enters a `with` block, the other then replaces it with a
new ContextVar, and the first, leaving its block, pops its stack to an empty tuple. Its page fails at the next
`st.fragment`, which reads the stack's last container: "IndexError: tuple index out of range" (tests/test_scale_out.py
met it once in CI on the self-attention page, whose sentence box is a fragment, before the box was drawn).

Importing this module creates the ContextVar. app.py imports it before any other Streamlit call, so the first run
creates it while every other first run waits on the import, and there is nothing left to race for
(tests/test_container_stack.py replays the interleaving with and without it).
"""
try:
    from streamlit.delta_generator_singletons import context_dg_stack
except ImportError:  # a Streamlit that keeps the stack elsewhere: the app runs (tests/test_container_stack.py says so)
    pass
else:
    context_dg_stack.get()  # creates the ContextVar (its default: the main container alone); a no-op once it exists

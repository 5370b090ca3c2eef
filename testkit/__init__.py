"""The harness that drives a running app the way a browser or a class does: a Streamlit server process, the websocket
protocol, fragment reruns, replicas behind nginx, load and serve scenarios. Used by tests/ and bench/.
"""

// Lives in a folder whose name says no op.
